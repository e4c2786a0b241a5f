"""The ``interlace`` command's own parsing, before any subcommand runs."""

from __future__ import annotations

import pytest

from interlace import cli


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["explore", "--bogus", "tests.x:y"], "usage: interlace explore [-h]"),
        (["replay", "tests.x:y", "il2.x", "--bogus"], "usage: interlace replay [-h]"),
        (["lint", "--bogus"], "usage: interlace lint [-h]"),
        (["reproduce", "--bogus"], "usage: interlace reproduce [-h]"),
    ],
)
def test_an_unknown_flag_after_a_subcommand_prints_that_subcommands_usage(
    capsys: pytest.CaptureFixture[str], argv: list[str], usage: str
) -> None:
    assert cli.main(argv) == cli.EXIT_ERROR
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(usage)
    command = argv[0]
    assert err.endswith(
        f"interlace {command}: error: {cli.MSG_UNRECOGNIZED.format(arguments='--bogus')}\n"
    )


def test_an_unknown_flag_before_the_subcommand_prints_the_top_level_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["--bogus", "lint"]) == cli.EXIT_ERROR
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("usage: interlace [-h] [--version] COMMAND ...\n")
    assert err.endswith(f"interlace: error: {cli.MSG_UNRECOGNIZED.format(arguments='--bogus')}\n")
