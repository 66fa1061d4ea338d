// placeholder: filled in by issue 3 work in progress
int main() { return 0; }
