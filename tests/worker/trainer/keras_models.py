"""Fixtures for trainer_keras_test, made by real Keras 3 (KERAS_BACKEND=jax).

    keras_models.py roundtrip DIR   models to train with Cohort and load back in Keras
    keras_models.py predict DIR     Keras' predictions of the models Cohort trained
    keras_models.py semantics GROUP DIR
                                    cases Keras trains too (keras_cases.py), so the test
                                    can compare Cohort's final weights with Keras'
    keras_models.py bad DIR         models and arrays that cohort-worker must refuse

Every case is a directory DIR/<case> holding init.keras (the initial weights, and the
compile_config unless the job's YAML gives it), x.npy, y.npy and job.yaml; DIR/cases.json
lists the cases. The test runs `cohort-worker train <case>/job.yaml --out <case>/out`.
"""

import json
import os
import sys
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import keras  # noqa: E402
from keras import layers  # noqa: E402

SEED = 1234


def write_job(case_dir, epochs, batch_size, compile_yaml=None, validation=None):
    """validation: None, a fraction (data.validation_split), or "files" (data.validation_x
    and validation_y: x_val.npy and y_val.npy)."""
    lines = [
        f"name: {os.path.basename(case_dir).replace('_', '-')}",
        "model: init.keras",
        "data:",
        "  x: x.npy",
        "  y: y.npy",
    ]
    if validation == "files":
        lines += ["  validation_x: x_val.npy", "  validation_y: y_val.npy"]
    elif validation is not None:
        lines.append(f"  validation_split: {validation}")
    lines += [
        "fit:",
        f"  epochs: {epochs}",
        f"  batch_size: {batch_size}",
        "  shuffle: false",
        "  seed: 7",
        "checkpoint:",
        "  every_epochs: 0",
    ]
    if compile_yaml:
        lines.append("compile:")
        lines += ["  " + line for line in compile_yaml.strip("\n").split("\n")]
    with open(os.path.join(case_dir, "job.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")


def save_case(root, name, model, x, y, epochs, batch_size, compile_yaml=None,
              validation=None, validation_data=None):
    """Writes the case's files. The model must be compiled unless compile_yaml is set
    (then init.keras is saved without compile_config)."""
    case_dir = os.path.join(root, name)
    os.makedirs(case_dir)
    np.save(os.path.join(case_dir, "x.npy"), x)
    np.save(os.path.join(case_dir, "y.npy"), y)
    if validation_data is not None:
        np.save(os.path.join(case_dir, "x_val.npy"), validation_data[0])
        np.save(os.path.join(case_dir, "y_val.npy"), validation_data[1])
        validation = "files"
    model.save(os.path.join(case_dir, "init.keras"))
    write_job(case_dir, epochs, batch_size, compile_yaml, validation)
    return case_dir


def write_cases(root, cases):
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)


def rng():
    return np.random.default_rng(SEED)


# ---- round trip ----


def roundtrip_models():
    """(name, model, x, y, x_pred): the four models of the issue, and one with Dropout."""
    r = rng()
    out = []

    mlp = keras.Sequential(
        [
            keras.Input((12,)),
            layers.Dense(16, activation="relu"),
            layers.Dense(8, activation="tanh"),
            layers.Dense(3, activation="softmax"),
        ],
        name="mlp",
    )
    mlp.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    x = r.normal(size=(64, 12)).astype("float32")
    out.append(("mlp", mlp, x, r.integers(0, 3, 64), x[:20]))

    cnn = keras.Sequential(
        [
            keras.Input((10, 9, 2)),
            # 16 filters over 2 channels: Cohort's loops for a first layer of few
            # channels, its rectifier folded into the pooling (layer_ops.h).
            layers.Conv2D(16, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(6, (2, 3), strides=(1, 2), activation="relu"),
            layers.Flatten(),
            layers.Dense(4, activation="softmax"),
        ],
        name="cnn",
    )
    cnn.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                loss="categorical_crossentropy", metrics=["accuracy"])
    x = r.normal(size=(48, 10, 9, 2)).astype("float32")
    y = np.eye(4, dtype="float32")[r.integers(0, 4, 48)]
    out.append(("cnn", cnn, x, y, x[:16]))

    inp = keras.Input((10,), name="features")
    h = layers.Dense(16, name="stem")(inp)
    h = layers.BatchNormalization(name="bn")(h)
    h = layers.Activation("relu")(h)
    branch = layers.Dense(16, activation="relu", name="branch")(h)
    h = layers.Add(name="residual")([h, branch])
    out_t = layers.Dense(1, name="head")(h)
    residual = keras.Model(inp, out_t, name="residual")
    residual.compile(optimizer=keras.optimizers.RMSprop(0.01), loss="mse", metrics=["mae"])
    x = r.normal(size=(50, 10)).astype("float32")
    out.append(("residual", residual, x, (x[:, :1] * 2 + 0.5).astype("float32"), x[:25]))

    text = keras.Sequential(
        [
            keras.Input((14,), dtype="int32"),
            layers.Embedding(30, 8),
            layers.Conv1D(6, 3, padding="same", activation="relu"),
            layers.MaxPooling1D(2),
            layers.Conv1D(6, 3, activation="relu"),
            layers.GlobalAveragePooling1D(),
            layers.Dense(1, activation="sigmoid"),
        ],
        name="text",
    )
    text.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy",
                 metrics=["accuracy"])
    x = r.integers(0, 30, size=(40, 14)).astype("int32")
    out.append(("text", text, x, r.integers(0, 2, 40).astype("float32"), x[:20]))

    dropout = keras.Sequential(
        [
            keras.Input((8,)),
            layers.Dense(16, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(16, activation="relu"),
            layers.Dropout(0.3, noise_shape=(None, 1)),
            layers.Dense(2, activation="softmax"),
        ],
        name="dropout",
    )
    dropout.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x = r.normal(size=(40, 8)).astype("float32")
    out.append(("dropout", dropout, x, r.integers(0, 2, 40), x[:20]))
    return out


def roundtrip(root):
    cases = []
    for name, model, x, y, x_pred in roundtrip_models():
        case_dir = save_case(root, name, model, x, y, epochs=2, batch_size=16)
        np.save(os.path.join(case_dir, "x_pred.npy"), x_pred)
        np.save(os.path.join(case_dir, "init_pred.npy"), model.predict(x_pred, verbose=0))
        cases.append({"name": name})
    write_cases(root, cases)


def predict(root):
    """Loads each case's out/model.keras (where Cohort wrote one) with
    keras.saving.load_model and predicts."""
    with open(os.path.join(root, "cases.json")) as f:
        cases = json.load(f)
    for case in cases:
        case_dir = os.path.join(root, case["name"])
        path = os.path.join(case_dir, "out", "model.keras")
        if not os.path.exists(path):
            continue
        # Keras warns (and restores nothing) when the saved optimizer state does not fit
        # the optimizer the file compiles: Cohort must save it as Keras does.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = keras.saving.load_model(path)
        problems = [str(w.message) for w in caught if "optimizer" in str(w.message)]
        if problems:
            sys.exit(f"{path}: Keras warned on load: {problems}")
        if model.optimizer is not None and model.optimizer.variables:
            # Restored, not fresh: the iteration counter holds Cohort's steps.
            if int(model.optimizer.iterations.numpy()) == 0:
                sys.exit(f"{path}: the optimizer state was not restored (iterations is 0)")
        x = np.load(os.path.join(case_dir, "x_pred.npy"))
        np.save(os.path.join(case_dir, "keras_pred.npy"),
                np.asarray(model.predict(x, verbose=0), dtype="float32"))


# ---- bad input ----


def bad(root):
    r = rng()
    lstm = keras.Sequential(
        [keras.Input((5, 3)), layers.LSTM(4, name="recurrent"), layers.Dense(2)], name="lstm"
    )
    lstm.compile(optimizer="sgd", loss="mse")
    lstm.save(os.path.join(root, "lstm.keras"))

    good = keras.Sequential(
        [keras.Input((4,)), layers.Dense(6, activation="relu"),
         layers.Dense(3, activation="softmax", name="probs")],
        name="good",
    )
    good.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    good.save(os.path.join(root, "good.keras"))

    regression = keras.Sequential(
        [keras.Input((4,)), layers.Dense(8), layers.Dense(2)], name="regression"
    )
    regression.compile(optimizer=keras.optimizers.SGD(1e15), loss="mse")
    regression.save(os.path.join(root, "exploding.keras"))

    with open(os.path.join(root, "good.keras"), "rb") as f:
        data = f.read()
    with open(os.path.join(root, "truncated.keras"), "wb") as f:
        f.write(data[: len(data) // 2])
    with open(os.path.join(root, "notzip.keras"), "w") as f:
        f.write("this is not a zip archive\n")

    x = r.normal(size=(30, 4)).astype("float32")
    np.save(os.path.join(root, "x.npy"), x)
    np.save(os.path.join(root, "x_lstm.npy"), r.normal(size=(30, 5, 3)).astype("float32"))
    np.save(os.path.join(root, "y.npy"), r.integers(0, 3, 30))
    np.save(os.path.join(root, "y_reg.npy"), (r.normal(size=(30, 2)) * 100).astype("float32"))
    np.save(os.path.join(root, "x_wide.npy"), r.normal(size=(30, 5)).astype("float32"))
    y_range = r.integers(0, 3, 30)
    y_range[11] = 3
    np.save(os.path.join(root, "y_range.npy"), y_range)
    x_nan = x.copy()
    x_nan[17, 2] = np.nan
    np.save(os.path.join(root, "x_nan.npy"), x_nan)
    np.save(os.path.join(root, "x_empty.npy"), np.zeros((0, 4), dtype="float32"))
    np.save(os.path.join(root, "y_empty.npy"), np.zeros((0,), dtype="int64"))
    y_float = r.integers(0, 3, 30).astype("float32")
    y_float[5] = 1.5
    np.save(os.path.join(root, "y_float.npy"), y_float)


def main(argv):
    keras.utils.set_random_seed(SEED)
    command = argv[1]
    if command == "roundtrip":
        roundtrip(argv[2])
    elif command == "predict":
        predict(argv[2])
    elif command == "semantics":
        import keras_cases

        keras_cases.run_group(argv[2], argv[3])
    elif command == "bad":
        bad(argv[2])
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main(sys.argv)
