"""2.7 by counting users (Kahn's algorithm) instead of a DFS: another order, each before its inputs."""

EXERCISE = "2.7"


def variant(root):
    if not root.requires_grad:
        return []
    users, found, todo = {id(root): 0}, {id(root): root}, [root]
    while todo:  # every tensor reachable from root that requires grad, and its user count
        t = todo.pop()
        for x in t._node.inputs if t._node is not None else ():
            if not x.requires_grad:
                continue
            if id(x) not in found:
                found[id(x)], users[id(x)] = x, 0
                todo.append(x)
            users[id(x)] += 1
    order, ready = [], [root]
    while ready:
        t = ready.pop(0)
        order.append(t)
        for x in t._node.inputs if t._node is not None else ():
            if x.requires_grad:
                users[id(x)] -= 1
                if users[id(x)] == 0:
                    ready.append(x)
    return order
