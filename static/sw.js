// Navi's service worker: shows the notifications the server pushes (Web Push, payload decrypted by
// the browser) and opens the right conversation when one is clicked. Served at /sw.js so that its
// scope is the whole site.

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

function parse(event) {
  if (!event.data) return { title: "Navi", body: "" };
  try {
    const data = event.data.json();
    return data && typeof data === "object" ? data : { title: "Navi", body: String(data) };
  } catch {
    return { title: "Navi", body: event.data.text() };
  }
}

self.addEventListener("push", (event) => {
  const data = parse(event);
  const url = typeof data.url === "string" && data.url.startsWith("/") ? data.url : "/";
  event.waitUntil(self.registration.showNotification(String(data.title || "Navi").slice(0, 200), {
    body: String(data.body || "").slice(0, 1500),
    tag: typeof data.tag === "string" ? data.tag : undefined,
    icon: "/static/favicon.svg",
    data: { url, kind: data.kind || null, session_id: data.session_id || null },
  }));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const target = new URL((event.notification.data && event.notification.data.url) || "/", self.location.origin);
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    const tab = windows.find((w) => new URL(w.url).origin === target.origin);
    if (tab) {
      await tab.focus();
      if (tab.url === target.href) return;
      try {
        await tab.navigate(target.href); // a tab this worker does not control refuses: open one instead
        return;
      } catch {
        /* fall through */
      }
    }
    await self.clients.openWindow(target.href);
  })());
});
