"""The app's server side: the shared model and its thread, the AR-vs-BiTA race, chat sessions, handlers
and the page layout; what changes on a Space (caps, CPU quota); the app in a child process and
concurrent visitors, for tests and benchmarks. The Space's folder and its upload: bita/cli/deploy.py."""
