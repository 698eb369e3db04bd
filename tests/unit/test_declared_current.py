"""The generated keyword calls of the handle are what the declarations make today."""

from __future__ import annotations

from tools.gen_declared import TARGET, main, render


def test_the_generated_calls_are_current() -> None:
    # ``python -m tools.gen_declared`` rewrites them after a declaration changed.
    assert main(["--check"]) == 0


def test_every_generated_file_is_checked() -> None:
    assert {p.name for p in TARGET.glob("*.py")} == set(render())
