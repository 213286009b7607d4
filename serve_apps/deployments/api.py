"""Every route the gateway serves, gathered once: `api_router` holds the API's resource routers
under `/v1`, each with its OpenAPI tag (the generated clients group operations by it), and
`page_router` the installable page's own files at the root.

One module per resource lives in `serve_apps.routes` (and the sockets in `serve_apps.sockets`);
a new resource is one line here.
"""

from fastapi import APIRouter

from serve_apps.http.app import API_PREFIX
from serve_apps.routes import (
    admin,
    auth,
    autonomy,
    calls,
    chat,
    confirmations,
    devices,
    events,
    files,
    memory,
    people,
    push,
    tasks,
    telegram,
    voice,
    web,
)
from serve_apps.sockets import camera as camera_socket
from serve_apps.sockets import devices as device_socket

# (router, tag), in the order they are matched: the order the routes had before they were gathered.
RESOURCES: tuple[tuple[APIRouter, str], ...] = (
    (memory.router, "memory"),
    (camera_socket.router, "camera"),
    (people.router, "people"),
    (devices.router, "devices"),
    (device_socket.router, "devices"),
    (events.router, "events"),
    (auth.router, "auth"),
    (chat.router, "conversations"),
    (confirmations.router, "conversations"),
    (files.router, "files"),
    (admin.router, "admin"),
    (tasks.router, "tasks"),
    (autonomy.router, "tasks"),
    (push.router, "notify"),
    (calls.router, "calls"),
    (telegram.router, "notify"),
    (voice.router, "voice"),
)

api_router = APIRouter(prefix=API_PREFIX)
for _router, _tag in RESOURCES:
    api_router.include_router(_router, tags=[_tag])

page_router = web.router
