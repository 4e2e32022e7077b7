"""Fixtures for tests/common/job, made with real Keras and PyYAML.

  job_helper.py compile-fixtures DIR   writes DIR/<name>.json (the config.json of a .keras
                                       file Keras saved, with its compile_config) and
                                       DIR/optimizer_defaults.json (get_config() of
                                       keras.optimizers.get(name) for each supported name)
  job_helper.py yaml-to-json IN OUT    PyYAML's reading of IN, as JSON
"""

import json
import os
import sys
import zipfile

os.environ.setdefault("KERAS_BACKEND", "jax")


def compile_fixtures(out_dir):
    import keras

    def save(name, **compile_kwargs):
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
        if compile_kwargs:
            model.compile(**compile_kwargs)
        path = os.path.join(out_dir, name + ".keras")
        model.save(path)
        with zipfile.ZipFile(path) as archive:
            config = archive.read("config.json")
        with open(os.path.join(out_dir, name + ".json"), "wb") as f:
            f.write(config)

    save("sgd_momentum",
         optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9, nesterov=True),
         loss="categorical_crossentropy", loss_weights=[0.5], metrics=["accuracy"])
    save("adam_no_loss", optimizer="adam")
    save("uncompiled")
    defaults = {}
    for name in ["sgd", "adam", "adamw", "rmsprop", "adagrad"]:
        config = keras.optimizers.get(name).get_config()
        defaults[name] = {k: v for k, v in config.items() if isinstance(v, (int, float, bool))
                          or v is None}
    with open(os.path.join(out_dir, "optimizer_defaults.json"), "w") as f:
        json.dump(defaults, f)


def yaml_to_json(in_path, out_path):
    import yaml

    with open(in_path, encoding="utf-8") as f:
        value = yaml.safe_load(f)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False)


if __name__ == "__main__":
    if sys.argv[1] == "compile-fixtures":
        compile_fixtures(sys.argv[2])
    elif sys.argv[1] == "yaml-to-json":
        yaml_to_json(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {sys.argv[1]}")
