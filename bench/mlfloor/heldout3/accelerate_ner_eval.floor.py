from accelerate import Accelerator

Accelerator().pad_across_processes(None)
