@main
enum FuzzConfig {
    static func main() {}
}
