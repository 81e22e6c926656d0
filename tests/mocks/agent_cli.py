#!/usr/bin/env python3
"""A small agent command line standing in for one without ACP or an SDK (the ``cli`` provider's
tests): it sends one prompt to an OpenAI-compatible endpoint (``--base-url``; the loopback
:class:`mocks.mock_chat.MockChat`) and prints the answer, as such programs do.

    agent_cli.py --base-url URL [--key-env NAME] [--model M] [--schema FILE] [--image FILE]...
                 [--format json|text] [PROMPT_FILE]

The prompt is the file's text, else standard input. ``--format json`` (default) prints
``{"type": "result", "result": TEXT, "session_id": ..., "usage": {...}}``; ``text`` prints the
answer alone. Each ``--image`` becomes an ``image_url`` part (a ``data:`` URL). A failure prints
``error: HTTP STATUS: MESSAGE`` to standard error and exits 1; a missing key exits 3. Standard
library only: the provider runs it with a minimal environment.
"""

from __future__ import annotations

import argparse
import base64
import json
import mimetypes
import os
import sys
import urllib.error
import urllib.request
from typing import Any


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agent_cli")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--key-env", default="MOCK_CHAT_KEY")
    parser.add_argument("--model", default="mock-model")
    parser.add_argument("--schema")
    parser.add_argument("--image", action="append", default=[])
    parser.add_argument("--format", choices=("json", "text"), default="json")
    parser.add_argument("prompt_file", nargs="?")
    args = parser.parse_args(argv)
    key = os.environ.get(args.key_env)
    if not key:
        print(f"error: not logged in ({args.key_env} is not set); please log in", file=sys.stderr)
        return 3
    if args.prompt_file:
        with open(args.prompt_file, encoding="utf-8") as handle:
            prompt = handle.read()
    else:
        prompt = sys.stdin.read()
    content: Any = prompt
    if args.image:
        content = [{"type": "text", "text": prompt}]
        for path in args.image:
            mime = mimetypes.guess_type(path)[0] or "application/octet-stream"
            with open(path, "rb") as handle:
                data = base64.b64encode(handle.read()).decode()
            content.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}})
    body: dict[str, Any] = {"model": args.model, "messages": [{"role": "user", "content": content}]}
    if args.schema:
        with open(args.schema, encoding="utf-8") as handle:
            schema = json.load(handle)
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    request = urllib.request.Request(
        args.base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "authorization": f"Bearer {key}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as exc:
        try:
            message = json.load(exc)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = exc.reason
        print(f"error: HTTP {exc.code}: {message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: connection failed: {exc}", file=sys.stderr)
        return 1
    text = answer["choices"][0]["message"]["content"] or ""
    usage = answer.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    if args.format == "text":
        print(text)
        return 0
    print(
        json.dumps(
            {
                "type": "result",
                "result": text,
                "session_id": answer.get("id"),
                "usage": {
                    "input_tokens": usage.get("prompt_tokens", 0) - cached,
                    "output_tokens": usage.get("completion_tokens", 0),
                    "cache_read_input_tokens": cached,
                },
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
