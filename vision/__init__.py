"""Perception and VLM logic with no Ray import (detection, OCR, dials, coach, review).

Empty until the camera issue; see the README's feature table.
"""
