"""Write the declared floors as pins: every `name>=X` in pyproject.toml (dependencies + the test extra)
becomes `name==X`, so CI installs the oldest versions the project claims to work with and tests them.

    python .ci/floors.py > /tmp/floors.txt && pip install -c /tmp/floors.txt -e ".[test]"
"""

import re
import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
requirements = project["dependencies"] + project["optional-dependencies"]["test"]
for req in requirements:
    m = re.match(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*>=\s*([0-9][^,;\s]*)", req)
    if not m:
        sys.exit(f"floors.py: {req!r} has no '>=' floor; every dependency needs one")
    print(f"{m.group(1)}=={m.group(3)}")
