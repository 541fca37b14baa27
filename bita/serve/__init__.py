"""The app's server side: the shared model and its thread, the AR-vs-BiTA race, chat sessions, handlers
and the page layout; running on a Space (caps, CPU quota) and deploying to one; the app in a child
process and concurrent visitors, for tests and benchmarks."""
