from tests.notify.pushserver import push_service  # noqa: F401 - fixture
from tests.notify.smtp import smtp_server  # noqa: F401 - fixture
