"""Framework integrations: LangGraph's long-term memory store and LangChain's retriever.

Each module needs its framework, installed by an extra (``oblivio[langgraph]``,
``oblivio[langchain]``); importing this package imports neither, and nothing
outside this package imports it.  The integrations use only the public facade
(:class:`oblivio.MemoryClient`); :mod:`oblivio.integrations.documents` holds the
framework-free part, the mapping of keyed JSON documents onto memories.
"""
