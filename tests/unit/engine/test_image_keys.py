"""A run's image attachments are part of every call's journal and content keys: a resume given other
images runs its calls live, and the same images replay them."""

from __future__ import annotations

from workflow_mcp.engine.journal import Replay, images_key
from workflow_mcp.engine.run import RunOptions, records_from_events, run_workflow
from workflow_mcp.providers import AgentContext, AgentRequest, AgentResult
from workflow_mcp.providers.base import ImageInput

from helpers import Outcome, RecordingProvider, arun, finish, run_source, workflow

BODY = "return await agent('describe the picture', { label: 'look' })"
RED = ImageInput(data=b"\x89PNG red", mime_type="image/png", name="red.png")
BLUE = ImageInput(data=b"\x89PNG blue", mime_type="image/png", name="blue.png")


def describing() -> RecordingProvider:
    async def answer(request: AgentRequest, context: AgentContext) -> AgentResult:
        return AgentResult(text="+".join(image.name for image in request.images) or "no image")

    return RecordingProvider(answer)


def resumed(first: Outcome, images: tuple[ImageInput, ...]) -> tuple[Outcome, RecordingProvider]:
    provider = describing()

    async def go() -> Outcome:
        handle = run_workflow(
            workflow(BODY),
            provider=provider,
            options=RunOptions(images=images),
            replay=Replay(records_from_events(first.events), "content"),
        )
        return await finish(handle)

    return arun(go()), provider


def test_other_images_run_the_call_again_and_the_same_images_replay_it() -> None:
    first = run_source(BODY, provider=describing(), images=(RED,))
    assert first.result == "red.png"

    same, provider = resumed(first, (RED,))
    assert (same.result, len(provider.calls)) == ("red.png", 0)
    assert [e.type for e in same.events].count("agent.cached") == 1

    other, provider = resumed(first, (BLUE,))
    assert (other.result, len(provider.calls)) == ("blue.png", 1)

    none, provider = resumed(first, ())
    assert (none.result, len(provider.calls)) == ("no image", 1)


def test_the_images_key_covers_order_type_and_bytes_and_is_empty_without_images() -> None:
    assert images_key(()) == ""
    keys = {
        images_key((RED,)),
        images_key((BLUE,)),
        images_key((RED, BLUE)),
        images_key((BLUE, RED)),
        images_key((ImageInput(data=RED.data, mime_type="image/gif"),)),
    }
    assert len(keys) == 5 and all(k.startswith("i1:") for k in keys)
    assert images_key((RED,)) == images_key((ImageInput(data=RED.data, mime_type="image/png", name="x"),))
