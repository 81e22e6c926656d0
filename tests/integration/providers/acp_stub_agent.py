"""A tiny scripted ACP agent (stdio) built on the same SDK, for what the loopback model mock cannot
provoke in a real agent: permission requests, AUTH_REQUIRED, a crash, reported usage, model
choices, children in the process group.

Run as ``python acp_stub_agent.py``. ``STUB_AUTH=new`` makes ``session/new`` answer
AUTH_REQUIRED; ``STUB_LOG`` names a file each prompt is appended to; while the file named by
``STUB_LOGGED_OUT`` exists, prompts starting with ``gated`` answer AUTH_REQUIRED (a login that
expired, then came back). Each prompt's first word chooses the behaviour:

- ``permission <kind> [path]`` asks permission for a tool call of that kind and replies with what
  the client chose: ``allow_once``, ``reject_once`` … (the kind of the selected option) or
  ``cancelled``;
- ``run <command> [;; <command> …]`` asks permission to execute each command in turn (its
  ``rawInput`` names it), runs each one allowed in the session's directory, and replies with the
  chosen option kinds joined by ``,``;
- ``auth`` answers AUTH_REQUIRED; ``fail <message>`` an internal error with that message;
- ``crash`` exits at once with code 3 after a line on stderr (``crash trace``: an error line, then a
  node-style stack and error object);
- ``hang`` says it waits, waits for ``session/cancel`` and ends the turn ``cancelled``;
- ``tools`` streams a message, a tool call and its update, then the final message ``final answer``;
- ``usage`` replies ``counted`` with token usage (input 7, output 3, cached read 2);
- ``model`` replies with the session's model and effort (config options ``model`` and
  ``reasoning_effort``);
- ``child`` starts a long-lived child process and replies with its pid; ``pid`` replies with its own;
- ``json <text>`` replies with ``<text>`` verbatim; ``system`` replies with the system prompt
  ``session/new`` gave as ``_meta.systemPrompt`` (``none`` without one); anything else is echoed back.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from typing import Any

import acp
from acp import schema


class StubAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cancelled: dict[str, asyncio.Event] = {}
        self.config: dict[str, dict[str, str]] = {}
        self.system: dict[str, str] = {}
        self.cwd: dict[str, str] = {}
        self.children: list[subprocess.Popen[bytes]] = []

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(load_session=False),
            agent_info=schema.Implementation(name="stub-agent", version="1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        if os.environ.get("STUB_AUTH") == "new":
            raise acp.RequestError.auth_required({"reason": "stub agent is logged out"})
        session_id = str(uuid.uuid4())
        self.cwd[session_id] = cwd
        self.cancelled[session_id] = asyncio.Event()
        self.config[session_id] = {"model": "stub-small", "reasoning_effort": "medium"}
        meta = kwargs.get("field_meta") or kwargs
        if isinstance(meta.get("systemPrompt"), str):
            self.system[session_id] = meta["systemPrompt"]
        return schema.NewSessionResponse(
            session_id=session_id,
            config_options=[
                select("model", "model", "stub-small", ["stub-small", "stub-large"]),
                select("reasoning_effort", "thought_level", "medium", ["low", "medium", "high"]),
            ],
        )

    async def set_config_option(self, config_id: str, session_id: str, value: Any, **kwargs: Any) -> Any:
        self.config[session_id][config_id] = str(value)
        return schema.SetSessionConfigOptionResponse(config_options=[])

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled[session_id].set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> schema.PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt)
        word, _, rest = text.partition(" ")
        usage = None
        if os.environ.get("STUB_LOG"):
            with open(os.environ["STUB_LOG"], "a") as log:
                log.write(text + "\n")
        if word == "gated" and os.path.exists(os.environ.get("STUB_LOGGED_OUT", "")):
            raise acp.RequestError.auth_required({"reason": "logged out"})
        if word == "permission":
            kind, _, path = rest.strip().partition(" ")
            reply = await self.ask(session_id, kind, path.strip() or None)
        elif word == "run":
            chosen = []
            for command in (c.strip() for c in rest.split(";;")):
                kind = await self.ask(session_id, "execute", None, command=command)
                if kind.startswith("allow"):
                    subprocess.run(command, shell=True, cwd=self.cwd[session_id], check=True, timeout=30)
                chosen.append(kind)
            reply = ",".join(chosen)
        elif word == "auth":
            raise acp.RequestError.auth_required({"reason": "token expired"})
        elif word == "fail":
            raise acp.RequestError.internal_error({"message": rest})
        elif word == "crash":
            if rest.strip() == "trace":  # the way a node agent dies: the error, then its stack
                print("Error: ENOENT: no such file or directory, lstat '/nowhere'", file=sys.stderr)
                print("    at Module.realpathSync (node:fs:2741:29)", file=sys.stderr)
                print("    at async main (file:///agent/cli.js:454:5) {", file=sys.stderr)
                print("  errno: -2", file=sys.stderr)
                print("}", file=sys.stderr, flush=True)
            else:
                print("stub agent crashed on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        elif word == "hang":
            await self.say(session_id, "waiting for session/cancel")
            await self.cancelled[session_id].wait()
            return schema.PromptResponse(stop_reason="cancelled")
        elif word == "tools":
            await self.say(session_id, "let me look")
            await self.conn.session_update(
                session_id, acp.start_tool_call("t1", "read a.ts", kind="read", status="in_progress")
            )
            await self.conn.session_update(session_id, acp.update_tool_call("t1", status="completed"))
            reply = "final answer"
        elif word == "usage":
            reply = "counted"
            usage = schema.Usage(total_tokens=10, input_tokens=7, output_tokens=3, cached_read_tokens=2)
        elif word == "model":
            conf = self.config[session_id]
            reply = f"{conf['model']}/{conf['reasoning_effort']}"
        elif word == "child":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            self.children.append(child)
            reply = str(child.pid)
        elif word == "pid":
            reply = str(os.getpid())
        elif word == "json":
            reply = rest
        elif word == "system":
            reply = self.system.get(session_id, "none")
        else:
            reply = text
        await self.say(session_id, reply)
        return schema.PromptResponse(stop_reason="end_turn", usage=usage)

    async def ask(self, session_id: str, kind: str, path: str | None, command: str | None = None) -> str:
        locations = [schema.ToolCallLocation(path=path)] if path else None
        tool = acp.update_tool_call(
            "p1",
            title=f"{kind} {command}" if command else f"{kind} something",
            kind=kind,  # type: ignore[arg-type]
            locations=locations,
            raw_input={"command": command} if command else None,
        )
        options = [
            schema.PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            schema.PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
            schema.PermissionOption(option_id="no", name="Reject", kind="reject_once"),
        ]
        answer = await self.conn.request_permission(session_id=session_id, tool_call=tool, options=options)
        outcome = answer.outcome
        if getattr(outcome, "outcome", None) == "selected":
            return next(o.kind for o in options if o.option_id == outcome.option_id)
        return "cancelled"

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, acp.update_agent_message_text(text))


def select(
    option_id: str, category: str, current: str, values: list[str]
) -> schema.SessionConfigOptionSelect:
    return schema.SessionConfigOptionSelect(
        id=option_id,
        name=option_id,
        category=category,  # type: ignore[arg-type]
        type="select",
        current_value=current,
        options=[schema.SessionConfigSelectOption(value=v, name=v) for v in values],
    )


if __name__ == "__main__":
    asyncio.run(acp.run_agent(StubAgent()))  # type: ignore[arg-type]
