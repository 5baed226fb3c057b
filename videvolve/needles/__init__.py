"""Needles: content painted into decoded frames at known times, so questions about any footage have exact answers.

The plan lives in the trusted parent; the video file is never rewritten (see the label-free guide).
"""
