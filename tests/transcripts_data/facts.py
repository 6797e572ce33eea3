#!/usr/bin/env python3
# ruff: noqa  (a copy of shared/transcripts/facts.py, kept in its own style)
"""Compute the facts an importer should reproduce for each fixture; write expected.json.

Stdlib only. Run from anywhere:  python3 facts.py
(This copy of shared/transcripts/facts.py also counts <task-notification> lines and a
compaction agent's instruction as text no human typed: the lines marked "added here".)
The counting rules below are the definition of the numbers in expected.json.
"""
import json
import os
import re
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))

# User text that Claude Code writes as type:"user" but that no human typed as a prompt.
NOT_A_PROMPT_PREFIXES = (
    "Caveat:", "<local-command-caveat>", "<local-command-stdout>", "<local-command-stderr>",
    "[Request interrupted by user",
    "<task-notification>",  # (added here: a background task's report, written by Claude Code)
)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def user_text(content):
    """Text of a Claude user message, or None if it is (only) tool results."""
    if isinstance(content, str):
        return content
    texts = [b.get("text", "") for b in content if b.get("type") == "text"]
    return "\n".join(texts) if texts else None


# ----------------------------------------------------------------------------- Claude Code
def claude_facts(lines):
    """Rules:
    - Only lines with type user/assistant count; progress lines are skipped, so the copies of
      subagent messages inside progress.data.message are never counted.
    - user prompt: type user, not isSidechain, not isMeta, not isCompactSummary, has text (not only
      tool_result blocks), and the text does not start with a NOT_A_PROMPT prefix or <command-name>.
      Slash commands (<command-name>) are counted separately as slash_commands.
    - subagent prompts: the same test on isSidechain lines (the Task prompt that opens a sidechain).
    - tool call: a distinct tool_use block id in an assistant line (all branches, sidechains included).
    - result: a tool_result block whose tool_use_id is one of those ids; error if is_error is true.
    - output tokens: one API message can span several lines with the same message.id, each repeating
      usage; take the max output_tokens per message.id and sum over ids.
    - active branch: start at the uuid-bearing line with the latest timestamp, walk parentUuid up,
      and jump through logicalParentUuid when a compact_boundary has parentUuid null.
    """
    line_types = Counter(l.get("type") for l in lines)
    prompts, sub_prompts, slash = [], [], []
    tool_ids, result_ids, error_ids = [], set(), set()
    out_by_msg = {}
    session_ids, agent_ids = set(), set()
    by_uuid = {}
    for l in lines:
        if l.get("sessionId"):
            session_ids.add(l["sessionId"])
        if l.get("agentId"):
            agent_ids.add(l["agentId"])
        if l.get("uuid"):
            by_uuid[l["uuid"]] = l
        msg = l.get("message")
        if l.get("type") == "assistant":
            for b in msg["content"]:
                if b.get("type") == "tool_use" and b["id"] not in tool_ids:
                    tool_ids.append(b["id"])
            out = (msg.get("usage") or {}).get("output_tokens")
            if out is not None:
                out_by_msg[msg["id"]] = max(out, out_by_msg.get(msg["id"], 0))
        elif l.get("type") == "user":
            content = msg["content"]
            if isinstance(content, list):
                for b in content:
                    if b.get("type") == "tool_result":
                        result_ids.add(b["tool_use_id"])
                        if b.get("is_error"):
                            error_ids.add(b["tool_use_id"])
            txt = user_text(content)
            if txt is None or l.get("isMeta") or l.get("isCompactSummary"):
                continue
            if l.get("isSidechain") and str(l.get("agentId", "")).startswith("acompact"):
                continue  # (added here: a compaction agent's instruction, written by Claude Code)
            stripped = txt.lstrip()
            if stripped.startswith(NOT_A_PROMPT_PREFIXES):
                continue
            if "<command-name>" in stripped:
                slash.append(re.search(r"<command-name>(.*?)</command-name>", stripped).group(1))
                continue
            (sub_prompts if l.get("isSidechain") else prompts).append(l["uuid"])

    # active branch (main chain only)
    candidates = [l for l in lines if l.get("uuid") and l.get("type") in ("user", "assistant")
                  and not l.get("isSidechain")]
    leaf = max(candidates, key=lambda l: l["timestamp"]) if candidates else None
    on_branch, node = [], leaf
    while node is not None:
        on_branch.append(node["uuid"])
        parent = node.get("parentUuid") or node.get("logicalParentUuid")
        node = by_uuid.get(parent)
    branch = set(on_branch)

    return {
        "format": "claude-code",
        "lines": len(lines),
        "line_types": dict(sorted(line_types.items())),
        "user_prompts": len(prompts),
        "subagent_prompts": len(sub_prompts),
        "slash_commands": slash,
        "tool_calls": len(tool_ids),
        "tool_call_ids": sorted(tool_ids),
        "tool_calls_with_result": len([t for t in tool_ids if t in result_ids]),
        "tool_results_error": len([t for t in tool_ids if t in error_ids]),
        "tool_calls_without_result": sorted(t for t in tool_ids if t not in result_ids),
        "session_ids": sorted(session_ids),
        "agent_ids": sorted(agent_ids),
        "assistant_messages": len(out_by_msg),
        "output_tokens": sum(out_by_msg.values()) if out_by_msg else None,
        "active_leaf_uuid": leaf["uuid"] if leaf else None,
        "active_branch_user_prompts": len([u for u in prompts if u in branch]),
    }


# ----------------------------------------------------------------------------- Codex
def exit_code(output):
    """Exit code of a tool output: JSON {"metadata":{"exit_code"}} (0.40, and custom_tool_call_output
    in 0.66) or plain text starting 'Exit code: N' (0.66+ shell_command). None if neither."""
    if not isinstance(output, str):
        return None
    try:
        data = json.loads(output)
        if isinstance(data, dict) and "metadata" in data:
            return data["metadata"].get("exit_code")
    except ValueError:
        pass
    m = re.match(r"Exit code: (-?\d+)", output)
    return int(m.group(1)) if m else None


def codex_facts(lines):
    """Rules:
    - user prompt: an event_msg user_message (the response_item user messages duplicate it and also
      carry <environment_context>, which is not a prompt).
    - tool call: function_call, custom_tool_call or local_shell_call, keyed by call_id.
    - result: function_call_output or custom_tool_call_output with that call_id; error if its exit
      code (see exit_code) is non-zero.
    - output tokens: token_count totals are cumulative and repeated, so take
      info.total_token_usage.output_tokens from the last token_count whose info is not null; a total
      lower than the one before means the counter started again from zero (a new base), so the
      totals before each restart are added.
    """
    line_types = Counter(l.get("type") for l in lines)
    payload_types = Counter("%s:%s" % (l["type"], l["payload"].get("type"))
                            for l in lines if isinstance(l.get("payload"), dict) and l["payload"].get("type"))
    prompts = 0
    calls, outputs = [], {}
    session_ids, aborted = [], 0
    total_out, base_out = None, 0
    for l in lines:
        p = l.get("payload") or {}
        t, pt = l.get("type"), p.get("type")
        if t == "session_meta":
            session_ids.append(p["id"])
        elif t == "event_msg" and pt == "user_message":
            prompts += 1
        elif t == "event_msg" and pt == "turn_aborted":
            aborted += 1
        elif t == "event_msg" and pt == "token_count" and p.get("info"):
            now = p["info"]["total_token_usage"]["output_tokens"]
            if total_out is not None and now < total_out:
                base_out += total_out  # the counter restarted
            total_out = now
        elif t == "response_item" and pt in ("function_call", "custom_tool_call", "local_shell_call"):
            if p["call_id"] not in calls:
                calls.append(p["call_id"])
        elif t == "response_item" and pt in ("function_call_output", "custom_tool_call_output"):
            outputs[p["call_id"]] = p["output"]
    errors = [c for c in calls if c in outputs and (exit_code(outputs[c]) or 0) != 0]
    return {
        "format": "codex",
        "lines": len(lines),
        "line_types": dict(sorted(line_types.items())),
        "payload_types": dict(sorted(payload_types.items())),
        "user_prompts": prompts,
        "tool_calls": len(calls),
        "tool_call_ids": sorted(calls),
        "tool_calls_with_result": len([c for c in calls if c in outputs]),
        "tool_results_error": len(errors),
        "tool_calls_without_result": sorted(c for c in calls if c not in outputs),
        "turns_aborted": aborted,
        "session_ids": session_ids,
        "output_tokens": None if total_out is None else base_out + total_out,
    }


def merge_claude(main, subs):
    """A main session plus its subagents/agent-*.jsonl files, counted as one session."""
    lines = list(main)
    for s in subs:
        lines += s
    return claude_facts(lines)


def main():
    expected = {}
    for sub in ("claude-code", "codex"):
        for root, _dirs, files in os.walk(os.path.join(HERE, sub)):
            for name in sorted(files):
                if not name.endswith(".jsonl"):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, HERE)
                lines = read_jsonl(path)
                facts = claude_facts(lines) if sub == "claude-code" else codex_facts(lines)
                sub_dir = os.path.join(root, name[:-len(".jsonl")], "subagents")
                if sub == "claude-code" and os.path.isdir(sub_dir):
                    sub_files = sorted(f for f in os.listdir(sub_dir) if f.endswith(".jsonl"))
                    facts["subagent_files"] = [os.path.relpath(os.path.join(sub_dir, f), HERE) for f in sub_files]
                    with_subs = merge_claude(lines, [read_jsonl(os.path.join(sub_dir, f)) for f in sub_files])
                    facts["with_subagents"] = {k: with_subs[k] for k in (
                        "user_prompts", "subagent_prompts", "tool_calls", "tool_call_ids",
                        "tool_calls_with_result", "tool_results_error", "session_ids", "agent_ids",
                        "assistant_messages", "output_tokens")}
                expected[rel] = facts
    expected = dict(sorted(expected.items()))
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
        f.write("\n")
    for rel, facts in expected.items():
        print("%-55s prompts=%-2s tools=%-2s results=%-2s errors=%-2s out=%s" % (
            rel, facts["user_prompts"], facts["tool_calls"], facts["tool_calls_with_result"],
            facts["tool_results_error"], facts["output_tokens"]))


if __name__ == "__main__":
    main()
