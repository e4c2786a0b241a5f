"""``interlace server``: the linter as a Language Server Protocol server, for editors.

The command only: the server itself (``_lsp``) imports pygls and lsprotocol, which take about as
long to import as the rest of the server, so that ``interlace``'s other commands, which build
this parser too, do not pay for them.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ("add_parser", "run")

_DESCRIPTION = """\
Run interlace's linter as a Language Server Protocol (LSP 3.17) server on standard input and
output, for editors: it lints each open Python buffer and Jupyter notebook as you type, with
the settings `interlace lint` gives that file (the closest pyproject.toml, per-file-ignores,
exclusions), shows the findings as diagnostics, and offers quick fixes: remove an unused
`# noqa` directive (IL001), disable a rule for a line (`# noqa: CODE`), and fix the whole
file (code action kind source.fixAll.interlace, which editors can run on save).

An editor starts it; it is not meant to be run by hand. Configure your editor's LSP client to
run the command `interlace server` for Python files, with the project root as the workspace."""

_EPILOG = """\
editors (docs/lint.md has the full configurations):
  Neovim 0.11+:  vim.lsp.config('interlace', { cmd = { 'interlace', 'server' },
                   filetypes = { 'python' }, root_markers = { 'pyproject.toml', '.git' } })
                 vim.lsp.enable('interlace')
  Helix:         languages.toml: [language-server.interlace] command = "interlace"
                   args = ["server"], and add "interlace" to the python language's
                   language-servers
  Emacs eglot:   (add-to-list 'eglot-server-programs
                   '(python-mode . ("interlace" "server")))
  VS Code, Zed:  a generic LSP client extension, with the command `interlace server`

Logs go to standard error (and to the editor's LSP log); standard output is the protocol."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``server`` subcommand to ``interlace``'s argparse subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "server",
        help="lint open files in an editor (a Language Server Protocol server)",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Serve on standard input and output until ``exit`` or the end of input; return the exit
    code (0 after ``shutdown``, 1 without, 2 when there is no standard input)."""
    from interlace.linters._lsp import serve_stdio

    return serve_stdio()
