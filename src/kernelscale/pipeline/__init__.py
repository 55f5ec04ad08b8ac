"""The pipeline wing: config checks, the ``kernelscale`` CLI, data download and preparation,
training runs, MLflow tracking, tables and plots (``docs/architecture.md``).

It imports the library (``kernelscale.estimators`` and below); the library never imports it
(``tests/test_architecture.py``).
"""
