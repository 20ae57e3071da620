"""Read one epoch view's images and targets as aligned pairs, with DALI or torchvision.

Usage: pairs.py dali|torch EPOCH_DIR [--workers N]

EPOCH_DIR is an epoch view (epoch-N or epoch-N@K); its targets are EPOCH_DIR.targets. The
targets are masks from `cassfs gen --masks`: grayscale PNGs whose first row is the SHA-256
of their image's bytes and whose other rows are its class, so every pair is checked from
its own content.

dali:  two fn.readers.file, over the two file_list.txt files, in order (no shuffling); the
       images and the masks decoded with fn.decoders.image (masks as GRAY).
torch: a Dataset of the two trees (two ImageFolders, item k of each), a DataLoader with
       shuffle=True and --workers workers; masks decoded with PIL.

Prints {"pairs": n, "mismatched": m, "images": [sha256 of each image, in the order read]}.
"""
import argparse
import hashlib
import json
import sys

import numpy as np


def check(image_bytes, mask, label):
    """Whether a decoded mask (H x W array) belongs to the image bytes and label."""
    digest = np.frombuffer(hashlib.sha256(image_bytes).digest(), dtype=np.uint8)
    return bool((mask[0, :32] == digest).all() and (mask[1:, :32] == label).all())


def read_dali(root):
    from nvidia.dali import fn, pipeline_def, types

    with open(f"{root}/file_list.txt") as f:
        n = sum(1 for line in f if line.strip())

    @pipeline_def(batch_size=8, num_threads=2, device_id=None)
    def pipe():
        images, labels = fn.readers.file(file_list=f"{root}/file_list.txt", name="images")
        masks, mask_labels = fn.readers.file(file_list=f"{root}.targets/file_list.txt", name="masks")
        decoded = fn.decoders.image(images, device="cpu")
        decoded_masks = fn.decoders.image(masks, device="cpu", output_type=types.GRAY)
        return images, labels, decoded, decoded_masks, mask_labels

    p = pipe()
    p.build()
    out, bad = [], 0
    while len(out) < n:
        images, labels, decoded, masks, mask_labels = p.run()
        for k in range(len(images)):
            if len(out) == n:
                break  # the last batch wraps into the next epoch
            data = images.at(k).tobytes()
            label = int(labels.at(k)[0])
            mask = np.asarray(masks.at(k))[:, :, 0]
            if label != int(mask_labels.at(k)[0]) or decoded.at(k).shape[2] != 3 or not check(data, mask, label):
                bad += 1
            out.append(hashlib.sha256(data).hexdigest())
    return out, bad


class Pairs:
    """Item k: the bytes of image k, its decoded mask and its label (the example of docs/mount-and-readers.md)."""

    def __init__(self, root):
        from PIL import Image
        from torchvision.datasets import ImageFolder

        self.images = ImageFolder(root, loader=lambda p: open(p, "rb").read())
        self.masks = ImageFolder(root + ".targets", loader=lambda p: np.array(Image.open(p)))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, k):
        (image, label), (mask, mask_label) = self.images[k], self.masks[k]
        ok = label == mask_label and check(image, mask, label)
        return hashlib.sha256(image).hexdigest(), ok


def read_torch(root, workers):
    from torch.utils.data import DataLoader

    out, bad = [], 0
    for digests, oks in DataLoader(Pairs(root), batch_size=8, shuffle=True, num_workers=workers):
        out.extend(digests)
        bad += sum(1 for ok in oks if not ok)
    return out, bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reader", choices=["dali", "torch"])
    ap.add_argument("root")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if args.reader == "dali":
        images, bad = read_dali(args.root)
    else:
        images, bad = read_torch(args.root, args.workers)
    json.dump({"pairs": len(images), "mismatched": bad, "images": images}, sys.stdout)


if __name__ == "__main__":
    main()
