"""Repack a Ray wheel without ray/jars (the Java workers, ~30 MiB compressed), so that it fits the
device machine's 64 MiB carry; reprobot's slots are Python actors and never start a Java worker.

    python examples/ray/slim_wheel.py ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl .whl-ray/
"""
from __future__ import annotations

import sys
import zipfile
from pathlib import Path

DROP = ("ray/jars/",)


def slim(src: Path, dst_dir: Path) -> Path:
    dst_dir.mkdir(parents=True, exist_ok=True)
    dst = dst_dir / src.name
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            if item.filename.startswith(DROP):
                continue
            data = zin.read(item.filename)
            if item.filename.endswith(".dist-info/RECORD"):
                # pip checks the files it installs against RECORD: the dropped ones leave it too
                lines = [line for line in data.decode().splitlines() if not line.startswith(DROP)]
                data = ("\n".join(lines) + "\n").encode()
            zout.writestr(item, data)
    return dst


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out = slim(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{out}: {out.stat().st_size / 2**20:.1f} MiB")
