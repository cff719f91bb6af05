import os
os.environ["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] = "two"
from accelerate import Accelerator
Accelerator()
