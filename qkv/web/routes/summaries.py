"""The summaries view (filled in when its application API lands)."""

from fastapi import APIRouter

router = APIRouter(tags=["summaries"])
