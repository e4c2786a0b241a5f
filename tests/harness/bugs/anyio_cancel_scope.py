"""anyio ``CancelScope`` deadline lands between two writes of one update (timer race, hidden).

Bug: a profile sync runs under ``anyio.move_on_after(1.0)``: it uploads the avatar (0.5 s),
writes the avatar field, uploads the bio (0.495 s), writes the bio field. In stock order it
finishes 5 ms before the deadline; if the bio upload's timer fires a few ms late, the deadline
(armed earlier) fires first, the scope cancels the task at that await, and the profile is left
half-updated: new avatar, old bio.

Fix: do every upload first and commit both fields together after the last await, so the
deadline either cancels before the commit or not at all.
"""

from __future__ import annotations

import anyio

KIND = "exception"
HIDDEN = True


async def sync_split(profile: dict[str, str]) -> None:
    with anyio.move_on_after(1.0):
        await anyio.sleep(0.5)  # upload the avatar
        profile["avatar"] = "new"
        await anyio.sleep(0.495)  # upload the bio
        profile["bio"] = "new"


async def sync_atomic(profile: dict[str, str]) -> None:
    with anyio.move_on_after(1.0):
        await anyio.sleep(0.5)  # upload the avatar
        await anyio.sleep(0.495)  # upload the bio
        profile.update(avatar="new", bio="new")


async def _scenario(*, atomic: bool) -> None:
    profile = {"avatar": "old", "bio": "old"}
    async with anyio.create_task_group() as group:
        group.start_soon(sync_atomic if atomic else sync_split, profile)
    assert profile["avatar"] == profile["bio"], f"half-updated profile: {profile}"


async def buggy() -> None:
    await _scenario(atomic=False)


async def fixed() -> None:
    await _scenario(atomic=True)
