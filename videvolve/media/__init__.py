"""Trusted media primitives on PyAV: probe, frames at timestamps, clips, contact sheets, a frame cache."""

from videvolve.media.cache import FrameCache, frame_cache
from videvolve.media.clip import ClipInfo, clip
from videvolve.media.decode import Frame, frames_at, iter_frames
from videvolve.media.info import VideoInfo, probe, stream_index
from videvolve.media.sheet import Sheet, contact_sheet, format_timestamp

__all__ = [
    "ClipInfo",
    "Frame",
    "FrameCache",
    "Sheet",
    "VideoInfo",
    "clip",
    "contact_sheet",
    "format_timestamp",
    "frame_cache",
    "frames_at",
    "iter_frames",
    "probe",
    "stream_index",
]
