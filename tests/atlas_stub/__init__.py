"""A stateful Apache Atlas REST stub on ``responses``, enforcing the server rules our bridge must meet.

Every rule cites the section of ``shared/reference/atlas.md`` it comes from. The stub is deliberately
strict where Atlas is strict (typedef create/update, entity upsert, reference resolution, required
attributes, relationship arrays replacing stored sets) so a payload it accepts is one Atlas accepts.

Use::

    with AtlasStub() as stub:            # base URL http://atlas.test:21000
        client = AtlasClient(stub.base_url, backoff=0)
        ...
        stub.fail_next(503, times=2)      # faults for retry tests
        stub.refuse_connections(times=1)  # requests.ConnectionError, like a refused connect

``stub.received`` lists every request (method, path, params, parsed JSON body, answered status).
"""

from atlas_stub.common import DEFAULT_BASE_URL, AtlasHTTPError, Received, iter_typedefs, names
from atlas_stub.server import AtlasStub

__all__ = ["DEFAULT_BASE_URL", "AtlasHTTPError", "AtlasStub", "Received", "iter_typedefs", "names"]
