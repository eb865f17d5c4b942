@main
enum FuzzSSE {
    static func main() {}
}
