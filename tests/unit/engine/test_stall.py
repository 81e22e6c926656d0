"""The run's stall watchdog (engine/stall.py): windows expire exactly when no progress came for their
stall time or their absolute limit passed, on one loop timer, and a cancellation that is not theirs
stays a cancellation. On a virtual-time loop, so every instant is exact."""

from __future__ import annotations

import asyncio

import pytest

from workflow_mcp.engine.stall import StallWatch

from helpers import run_in_virtual_time


async def wait_in(watch: StallWatch, stall_s: float, limit: float | None, work: float) -> float:
    """Enter a window and sleep ``work`` seconds in it; the loop time it raised TimeoutError at."""
    loop = asyncio.get_running_loop()
    window = watch.window(stall_s, limit)
    with pytest.raises(TimeoutError):
        async with window:
            await asyncio.sleep(work)
    assert window.expired()
    return loop.time()


def test_a_window_without_progress_expires_after_its_stall_time() -> None:
    async def go() -> float:
        return await wait_in(StallWatch(), 0.05, None, 10)

    assert run_in_virtual_time(go()) == pytest.approx(0.05)


def test_progress_moves_the_deadline_and_the_absolute_limit_still_holds() -> None:
    async def go() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        watch = StallWatch()
        window = watch.window(1.0, None)
        with pytest.raises(TimeoutError):
            async with window:
                for _ in range(5):  # progress every 0.9 s: never a whole second without
                    await asyncio.sleep(0.9)
                    window.progress()
                await asyncio.sleep(10)
        stalled = loop.time()  # 4.5 + 1.0
        start = loop.time()
        limited = watch.window(1.0, start + 2.5)
        with pytest.raises(TimeoutError):
            async with limited:
                while True:
                    await asyncio.sleep(0.5)
                    limited.progress()
        return stalled, loop.time() - start

    stalled, limited = run_in_virtual_time(go())
    assert stalled == pytest.approx(5.5)
    assert limited == pytest.approx(2.5)


def test_windows_that_end_in_time_leave_nothing_to_expire_and_others_expire_on_their_own() -> None:
    async def go() -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        watch = StallWatch()
        ended: list[tuple[str, float]] = []

        async def call(name: str, stall_s: float, work: float) -> None:
            window = watch.window(stall_s)
            try:
                async with window:
                    await asyncio.sleep(work)
                ended.append((name, loop.time()))
            except TimeoutError:
                ended.append((f"{name} stalled", loop.time()))

        await asyncio.gather(call("fast", 1.0, 0.1), call("slow", 0.3, 5), call("long", 2.0, 1.5))
        return ended

    ended = [(name, round(at, 6)) for name, at in run_in_virtual_time(go())]
    assert ended == [("fast", 0.1), ("slow stalled", 0.3), ("long", 1.5)]


def test_a_paused_window_never_expires_and_resumes_from_now() -> None:
    async def go() -> float:
        loop = asyncio.get_running_loop()
        window = StallWatch().window(1.0)
        with pytest.raises(TimeoutError):
            async with window:
                window.pause()
                await asyncio.sleep(30)  # a human deciding a checkpoint
                window.resume()
                await asyncio.sleep(30)
        return loop.time()

    assert run_in_virtual_time(go()) == pytest.approx(31.0)


def test_a_cancellation_from_outside_is_not_turned_into_a_timeout() -> None:
    async def go() -> tuple[bool, bool]:
        watch = StallWatch()
        window = watch.window(0.5)

        async def attempt() -> None:
            async with window:
                await asyncio.sleep(10)

        task = asyncio.ensure_future(attempt())
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(1)  # the watch's timer fires with nothing left to expire
        return window.expired(), task.cancelled()

    assert run_in_virtual_time(go()) == (False, True)


def test_a_timeout_the_provider_raises_itself_is_not_the_windows() -> None:
    async def go() -> bool:
        window = StallWatch().window(5.0)
        with pytest.raises(TimeoutError):
            async with window:
                async with asyncio.timeout(0.1):  # the provider's own
                    await asyncio.sleep(1)
        return window.expired()

    assert run_in_virtual_time(go()) is False
