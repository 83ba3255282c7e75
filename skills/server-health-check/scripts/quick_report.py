"""Disk, memory and load of the machine this runs on, from the standard library only (read-only)."""
import os
import shutil


def meminfo():
    values = {}
    with open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            values[key] = int(rest.split()[0]) // 1024  # MB
    return values


def main():
    total, used, free = shutil.disk_usage("/")
    print(f"disk /: {used * 100 // total} % used, {free // 2**30} GB free of {total // 2**30} GB")
    mem = meminfo()
    available = mem.get("MemAvailable", 0)
    print(f"memory: {available} MB available of {mem.get('MemTotal', 0)} MB "
          f"({available * 100 // max(mem.get('MemTotal', 1), 1)} %)")
    swap_total = mem.get("SwapTotal", 0)
    if swap_total:
        print(f"swap: {swap_total - mem.get('SwapFree', 0)} MB used of {swap_total} MB")
    one, five, fifteen = os.getloadavg()
    print(f"load: {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores")


main()
