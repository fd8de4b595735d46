"""Ferrite: ONNX inference for microcontrollers and edge GPUs, from Python.

    import ferrite
    frt, report = ferrite.pack("model.onnx", input_shapes={"x": (1, 64)})
    session = ferrite.Session(frt)               # or a path, or an onnx.ModelProto
    scores = session.run({"x": features})        # {output name: numpy array}
    [scores] = session.run(None, {"x": features})  # onnxruntime's form
    print(session.bench(runs=100)["median_us"])

Every failure raises a subclass of ``ferrite.FerriteError`` carrying the same one-line message
as the ``ferrite`` CLI. The work is done by Ferrite's Rust crates; this package only converts.
"""

from ._ferrite import (
    DeviceError,
    FerriteError,
    InputError,
    ModelError,
    PackError,
    Quantization,
    Session,
    SessionError,
    TensorInfo,
    __version__,
    pack,
)

__all__ = [
    "DeviceError",
    "FerriteError",
    "InputError",
    "ModelError",
    "PackError",
    "Quantization",
    "Session",
    "SessionError",
    "TensorInfo",
    "__version__",
    "pack",
]
