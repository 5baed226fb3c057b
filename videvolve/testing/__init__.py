"""Test helpers shipped with the package, importable from here as before the split.

- :mod:`~videvolve.testing.index_video`: videos whose frames encode their own index (``make_index_video``,
  ``index_frame``, ``read_index``);
- :mod:`~videvolve.testing.servers`: ports and servers over real sockets (``reserved_port``, ``free_port``,
  ``serve_sim``, ``serve_scripted_chat``, ``serve_app``, ``trickle``);
- :mod:`~videvolve.testing.fakes`: fakes of the models and of a run (``ScriptedReplies``, ``CountingVLM``,
  ``GarbageVLM``, ``ScriptedChat``, ``tool_call``, ``ScriptedEditor``, ``OneWorkspace``, ``FakeRun``);
- :mod:`~videvolve.testing.faults`: failures provoked on purpose (``interrupt_after``, ``in_thread``,
  ``full_disk``).
"""

from videvolve.testing.fakes import (
    CountingVLM,
    FakeRun,
    GarbageVLM,
    OneWorkspace,
    ScriptedChat,
    ScriptedEditor,
    ScriptedReplies,
    tool_call,
)
from videvolve.testing.faults import full_disk, in_thread, interrupt_after
from videvolve.testing.index_video import BITS, index_frame, make_index_video, read_index
from videvolve.testing.servers import free_port, reserved_port, serve_app, serve_scripted_chat, serve_sim, trickle

__all__ = ["BITS", "CountingVLM", "FakeRun", "GarbageVLM", "OneWorkspace", "ScriptedChat", "ScriptedEditor",
           "ScriptedReplies", "free_port", "full_disk", "in_thread", "index_frame", "interrupt_after",
           "make_index_video", "read_index", "reserved_port", "serve_app", "serve_scripted_chat", "serve_sim",
           "tool_call", "trickle"]
