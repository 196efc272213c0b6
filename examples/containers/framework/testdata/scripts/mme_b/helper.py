SCALE = 100.0
TAG = "b"
