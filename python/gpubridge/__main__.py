"""python -m gpubridge [OPTIONS]: runs gpubridge-info with OPTIONS, so it
prints the same (version, device, settings; -c, --version, --trace DIR, -h)."""
from ._tools import info

info()
