"""A contact sheet is drawn again (the report, the editor's workspace) as the model was shown it: its columns too."""

from __future__ import annotations

from videvolve.config import RuntimeSettings
from videvolve.editing.workspace import _render
from videvolve.media.sheet import contact_sheet
from videvolve.models.cost import cost_model
from videvolve.needles.frames import frame_source
from videvolve.skill_library.services import TaskServices
from videvolve.skill_library.steps import SheetSpec
from videvolve.testing import ScriptedReplies


def test_a_sheet_of_three_columns_is_drawn_again_with_three(small_world):
    """The trace kept the cell width but not the columns, and both re-renderers drew every sheet 6 wide: a harness
    whose editor set ``sheet_cols`` was shown otherwise in the report and the workspace than the model saw it."""
    task = next(t for t in small_world.tasks if t.split == "train")
    vlm = ScriptedReplies(["A"])
    services = TaskServices(task.view(), task.video, vlm, cost_model("qwen2.5-vl"), RuntimeSettings())
    times = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    handle = services.op_sheet(times, cols=3, cell_width=64)["handle"]
    spec = services._spec(handle)
    assert isinstance(spec, SheetSpec) and spec.cols == 3 and spec.cell_width == 64
    [(_, drawn)] = _render(task, spec)
    frames = frame_source(task).frames(times, 64)
    assert drawn.size == contact_sheet(frames, cols=3, cell_width=64).image.size
    assert drawn.size != contact_sheet(frames, cols=6, cell_width=64).image.size
