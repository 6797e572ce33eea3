"""Adapters that keep an agent framework's sessions in eventstore.

* :mod:`eventstore.integrations.openai_agents`: ``EventStoreSession``, a drop-in
  ``Session`` for the OpenAI Agents SDK (extra ``openai-agents``).
* :mod:`eventstore.integrations.pydantic_ai`: record a pydantic-ai run's messages and
  rebuild its ``message_history`` (extra ``pydantic-ai``).

The core never imports a framework; each adapter imports its own when it is imported.
"""
