"""Front-ends: translate ONNX models and PyTorch programs into the ECG. They do not
optimize, except that shape arithmetic on static shapes is folded at import."""
