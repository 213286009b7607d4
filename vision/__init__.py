"""Perception and VLM logic for the live camera assistant, with no Ray import.

frames (JPEG checks, resize for the VLM), detect (yolov3-tiny offline, Ultralytics on configured
weights), ocr (RapidOCR, or PaddleOCR on configured model folders), dial (needle geometry),
perception (one frame through all of them; the offline answer), vlm (capped context, lenient
answer parser), crosscheck (VLM vs geometric dial reading), procedure (steps, instruments,
debouncing), coach (coach mode and noticing writing), review (clip sampling and the report).
"""
