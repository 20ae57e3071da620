"""Print {"<class>/<file>": sha256 of the decoded pixels} for an ImageFolder tree, decoded
the way ImageFolder's default loader does (PIL, converted to RGB)."""
import hashlib
import json
import os
import sys

from PIL import Image

root = sys.argv[1]
out = {}
for cls in sorted(os.listdir(root)):
    for name in sorted(os.listdir(os.path.join(root, cls))):
        with open(os.path.join(root, cls, name), "rb") as f:
            img = Image.open(f).convert("RGB")
        out[cls + "/" + name] = hashlib.sha256(img.tobytes()).hexdigest()
json.dump(out, sys.stdout)
