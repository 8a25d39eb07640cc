"""Your framework learns to read handwriting: an MLP on scikit-learn's bundled digits, >= 97% test accuracy.

Run it with `./learn milestone 05`: it trains with your own package. (In the course repository,
`./course milestone digits` runs it with the reference package.) The learning curves, the confusion matrix and misclassified digits go to
artifacts/milestone-digits.png.
"""
REQUIRES = ("01_tensor", "02_strides", "03_autograd", "04_layers", "05_training")

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from tinytorch.training import plot_digits_result, train_digits

epochs = int(os.environ.get("DIGITS_EPOCHS", "40"))
result = train_digits(epochs=epochs)
picture = Path("artifacts") / "milestone-digits.png"
picture.parent.mkdir(parents=True, exist_ok=True)
plot_digits_result(result, picture)
accuracy = result["test_accuracy"]
print(f"digits MLP: test accuracy {100 * accuracy:.2f}% after {epochs} epochs in {result['seconds']:.1f} s")
print(f"confusion matrix and misclassified digits: {picture.resolve()}")
assert accuracy >= 0.97, f"milestone 05 needs >= 97% test accuracy, got {100 * accuracy:.2f}%"
print("milestone 05 passed")
