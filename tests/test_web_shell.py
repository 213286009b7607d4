"""The service worker's app shell lists every module the page can import, so an app installed
and then opened offline never meets a module that was not cached."""

from __future__ import annotations

import re
from pathlib import Path

WEB = Path(__file__).resolve().parent.parent / "web"


def test_the_shell_lists_every_script_the_page_imports() -> None:
    sw = (WEB / "sw.js").read_text()
    shell = set(re.findall(r'"(/[^"]*)"', sw[sw.index("const SHELL"):sw.index("];")]))
    scripts = {f"/static/{p.relative_to(WEB).as_posix()}" for p in [*WEB.glob("js/*.js"), *WEB.glob("vendor/*.js")]}
    assert scripts and scripts <= shell, sorted(scripts - shell)
    # And nothing it lists is missing from the folder (a renamed file would only fail quietly).
    for path in shell:
        if path.startswith("/static/"):
            assert (WEB / path.removeprefix("/static/")).is_file(), path
