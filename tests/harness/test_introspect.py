"""Where a report says code is: paths short enough to read, and still unambiguous."""

from __future__ import annotations

import asyncio
import os

import pytest

from interlace.harness._introspect import short_path


@pytest.mark.parametrize(
    ("filename", "shown"),
    [
        ("/venv/lib/python3.11/site-packages/langgraph/pregel/main.py", "langgraph/pregel/main.py"),
        ("/usr/lib/python3/dist-packages/yaml/nodes.py", "yaml/nodes.py"),
        (asyncio.tasks.__file__, os.path.join("asyncio", "tasks.py")),
        ("/elsewhere/app/models.py", "/elsewhere/app/models.py"),
        ("<string>", "<string>"),
    ],
)
def test_a_library_file_is_shown_from_where_it_was_installed(filename: str, shown: str) -> None:
    assert short_path(filename) == shown


def test_a_file_below_the_working_directory_is_shown_relative_to_it() -> None:
    assert short_path(os.path.join(os.getcwd(), "site-packages", "lib.py")) == os.path.join(
        "site-packages", "lib.py"
    )
