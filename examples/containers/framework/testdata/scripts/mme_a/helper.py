SCALE = 2.0
TAG = "a"
