"""Where the tests' own copies of outside data live (tests never read ../shared)."""

from pathlib import Path

DATA = Path(__file__).parent / "data"
