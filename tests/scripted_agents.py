"""A scripted OpenAI Agents SDK model (no network) for the integration tests and the
README's example: each model call returns the next output of its script."""

from __future__ import annotations

import json

from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import InputTokensDetails, OutputTokensDetails, Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseUsage,
)


def text(t: str, id: str = "msg_1") -> list:
    """A model output: one assistant message."""
    return [ResponseOutputMessage(id=id, type="message", role="assistant", status="completed",
                                  content=[ResponseOutputText(type="output_text", text=t, annotations=[],
                                                              logprobs=[])])]


def calls(*calls: tuple[str, str, dict]) -> list:
    """A model output: function calls ``(call_id, name, arguments)``."""
    return [ResponseFunctionToolCall(id=f"fc_{cid}", type="function_call", call_id=cid, name=name,
                                     arguments=json.dumps(args), status="completed")
            for cid, name, args in calls]


class ScriptedModel(Model):
    """Returns the outputs of ``script`` in order; records each request as
    ``(instructions, input items, tool names)``. Streams a message's text in pieces of
    three characters."""

    def __init__(self, script: list[list]):
        self.script = list(script)
        self.requests: list[tuple] = []

    def usage(self) -> Usage:
        """The token usage the model reports for its n-th request (n from 1): input 100 n,
        of which n cached; output 10 n, of which n reasoning."""
        n = len(self.requests)
        return Usage(requests=1, input_tokens=100 * n, output_tokens=10 * n, total_tokens=110 * n,
                     input_tokens_details=InputTokensDetails(cached_tokens=n, cache_write_tokens=0),
                     output_tokens_details=OutputTokensDetails(reasoning_tokens=n))

    def _next(self, system_instructions, input, tools) -> list:
        self.requests.append((system_instructions, json.loads(json.dumps(input)), [t.name for t in tools]))
        return self.script.pop(0)

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        output = self._next(system_instructions, input, tools)
        return ModelResponse(output=output, usage=self.usage(), response_id=None)

    async def stream_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                              tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        output = self._next(system_instructions, input, tools)
        u = self.usage()
        usage = ResponseUsage(input_tokens=u.input_tokens, output_tokens=u.output_tokens, total_tokens=u.total_tokens,
                              input_tokens_details={"cached_tokens": u.input_tokens_details.cached_tokens,
                                                    "cache_write_tokens": 0},
                              output_tokens_details={"reasoning_tokens": u.output_tokens_details.reasoning_tokens})
        response = Response(id=f"resp_{len(self.requests)}", created_at=0, model="scripted", object="response",
                            output=output, tool_choice="auto", tools=[], parallel_tool_calls=False, usage=usage)
        yield ResponseCreatedEvent(type="response.created", response=response, sequence_number=0)
        n = 1
        for index, item in enumerate(output):
            if item.type == "message":
                for part in item.content:
                    for k in range(0, len(part.text), 3):
                        yield ResponseTextDeltaEvent(type="response.output_text.delta", item_id=item.id,
                                                     output_index=index, content_index=0,
                                                     delta=part.text[k:k + 3], logprobs=[], sequence_number=n)
                        n += 1
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=n)
