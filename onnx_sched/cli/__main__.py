"""``python -m onnx_sched.cli``."""

from onnx_sched.cli import main

if __name__ == "__main__":
    main()
