"""A client generated from the OpenAPI document works against the real server (issue 31).

datamodel-code-generator writes a typed client package (its HTTPX2 client, with pydantic models)
from the gateway's own document into tmp_path at test time: no network, no formatter beyond its
built-in one. The test then does what a user of that client does, as the owner: lists memory,
adds an item and reads it back by id, asks for a missing id (a 404 whose body parses into the
document's error model), reads the pool and the liveness probe. Any answer outside the
document fails here as a decoding or status error of the generated client.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.common.ids import MAX_ROW_ID
from tests.conftest import OWNER_KEY

pytestmark = pytest.mark.e2e
PACKAGE = "iriis_generated"


def generate_client(document: dict[str, Any], into: Path, package: str = PACKAGE) -> None:
    """Write `package` (its models and its client) for `document` under `into`."""
    from datamodel_code_generator import InputFileType, generate
    from datamodel_code_generator.enums import ClientType
    from datamodel_code_generator.format import Formatter

    root = into / package
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    generate(json.dumps(document), input_file_type=InputFileType.OpenAPI, output=root / "models.py",
             generate_client=ClientType.HTTPX2, client_output=root / "client",
             client_package=f"{package}.client", client_model_package=f"{package}.models",
             client_server_base_url="http://localhost:8000", formatters=[Formatter.BUILTIN])


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The generated package, imported: `.client` (Client, errors) and `.models`."""
    from serve_apps.deployments.gateway import app

    into = tmp_path_factory.mktemp("generated")
    generate_client(app.openapi(), into)
    sys.path.insert(0, str(into))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(into))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def test_the_generated_client_does_what_a_user_does(server, generated) -> None:
    client_module = importlib.import_module(f"{PACKAGE}.client")
    errors = importlib.import_module(f"{PACKAGE}.client.errors")
    models = importlib.import_module(f"{PACKAGE}.models")
    with client_module.Client(base_url=server.url, bearer=OWNER_KEY, max_retries=0, timeout=60) as client:
        # Operations are grouped by the document's tags; the liveness probe has none.
        api = client.memory
        before = api.memory_list_v1_memory_get(limit=2000)
        assert isinstance(before, models.MemoryList) and before.count == len(before.data)

        added = api.memory_add_v1_memory_post(body=models.MemoryCreate(
            kind="fact", text="The generated client's owner keeps bees on an allotment", importance=6))
        assert isinstance(added, models.MemoryAdded) and added.id >= 1
        again = api.memory_get_v1_memory__item_id__get(item_id=added.id)
        assert isinstance(again, models.MemoryPublic)
        assert (again.id, again.kind, again.text) == (added.id, "fact", added.text)
        listed = api.memory_list_v1_memory_get(search="allotment", limit=2000)
        assert added.id in [item.id for item in listed.data]

        with pytest.raises(errors.NotFoundError) as missing:
            api.memory_get_v1_memory__item_id__get(item_id=MAX_ROW_ID)
        assert missing.value.status_code == 404
        assert isinstance(missing.value.body, models.ErrorBody) and missing.value.body.error.code == "not_found"

        pool = client.admin.session_pool_v1_pool_get()
        assert isinstance(pool, models.SessionPoolPublic)
        assert client.default.healthz_healthz_get() == models.Health(status="ok")

    # With a key the server does not accept, the documented 401 in the error model.
    with client_module.Client(base_url=server.url, bearer="not-a-key", max_retries=0, timeout=60) as stranger:
        with pytest.raises(errors.AuthenticationError) as refused:
            stranger.memory.memory_list_v1_memory_get()
        assert isinstance(refused.value.body, models.ErrorBody) and refused.value.body.error.code == "unauthorized"
