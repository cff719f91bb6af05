import argparse, io, torch

torch.save(argparse.Namespace(), buf := io.BytesIO())
torch.load(io.BytesIO(buf.getvalue()))
